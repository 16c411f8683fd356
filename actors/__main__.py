from actors.cli import main

main()
