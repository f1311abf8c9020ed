"""``python -m fleetaudit`` runs the command line."""

if __name__ == "__main__":
    from fleetaudit.cli import main

    main()
