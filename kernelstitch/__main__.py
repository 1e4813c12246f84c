from kernelstitch.cli import main

main()
