from aqven.cli.main import main

main()
