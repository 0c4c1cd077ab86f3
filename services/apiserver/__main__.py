"""`python -m skiff.apiserver` / `skiff-apiserver`."""

from skiff.apiserver.app import main

if __name__ == "__main__":
    main()
