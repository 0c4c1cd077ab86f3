"""`python -m skiff.kubelet` / `skiff-kubelet`."""

from skiff.kubelet.app import main

if __name__ == "__main__":
    main()
