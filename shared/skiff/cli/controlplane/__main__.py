"""`python -m skiff.cli.controlplane`: the control-plane node agent (see the package)."""

from skiff.cli.controlplane.agent import main

if __name__ == "__main__":
    main()
