"""`python -m skiff.cluster.controlplane`: the control-plane node agent (see the package)."""

from skiff.cluster.controlplane.agent import main

if __name__ == "__main__":
    main()
