from tritonsmith.cli import main

main()
