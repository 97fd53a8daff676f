from ctxbench.cli import main

main(prog_name="ctxbench")
