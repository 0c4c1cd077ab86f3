"""`skiff up --netns`: every component on a network host of its own, and real partitions.

`commands` (ip/nft), `hosts` (the namespaces and bridge), `gateway` (the published ports),
`partitions` and `pods` (nftables cuts between hosts and between pods), `cluster` (the
launcher).
"""
