package com.example;

public class Greeter {
    public String greet(String who) {
        return "hello " + who;
    }
}

class Base {}
