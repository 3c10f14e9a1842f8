from gg.cli.app import main

main()
