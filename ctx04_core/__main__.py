from ctx04_core.cli import main

main()
