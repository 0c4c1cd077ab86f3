"""`python -m skiff.fence_agent` / `skiff-fence-agent`."""

from skiff.fence_agent.app import main

if __name__ == "__main__":
    main()
