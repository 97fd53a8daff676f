// Package server serves requests.
package server

import "fmt"

// Server holds the listener state.
type Server struct {
	addr string
}

// Handler handles one request.
type Handler interface {
	Handle(req string) string
}

// Start starts the server.
func (s *Server) Start() error {
	s.log("starting")
	return fmt.Errorf("not implemented: %s", s.addr)
}

func (s *Server) log(msg string) {
	fmt.Println(msg)
}

// NewServer builds a server.
func NewServer(addr string) *Server {
	return &Server{addr: addr}
}
