from attnmatch.cli import main

main()
