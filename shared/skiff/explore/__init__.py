"""`skiff explore`: test an unmodified controller under stale views, missed events and
crashes, found automatically (issue 35).

A reference run (no fault) records, from the apiserver's side, what the controller read,
was delivered and wrote (record.py); a test plan puts one perturbation at each point where
a decision followed a state (plan.py); each test runs in a fresh cluster (cluster.py,
driver.py); the oracle compares its end state with the reference run's (oracle.py,
snapshot.py, invariants.py) and a report names the faulty decision (report.py).
"""
