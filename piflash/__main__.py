"""``python -m piflash``: same as the ``piflash`` command."""

from piflash.cli import main

if __name__ == "__main__":
    main()
