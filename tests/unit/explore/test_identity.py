"""`skiff explore run --identity USER [--controller-pods SELECTOR]` (SPEC CT2, issue 35 item
2: the controller given by the identity of one already running): the CLI's rules for how
the controller is given, the options a saved reference carries for `skiff explore replay`,
and the in-pod example's script shipped byte for byte in its ConfigMap."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from skiff.cli.explore import controller_form
from skiff.cli.main import build_parser
from skiff.cli.resources import CliError
from skiff.explore.driver import Options
from skiff.explore.plan import KINDS
from skiff.explore.session import load_reference
from skiff.explore.workload import load_workload

ROOT = Path(__file__).resolve().parents[3]
INPOD = ROOT / "examples" / "explore" / "inpod"
WORKLOAD = str(INPOD / "workload.yaml")
SA = "system:serviceaccount:inpod:operator"


def _run(*argv: str) -> None:
    args: argparse.Namespace = build_parser().parse_args(["explore", "run", WORKLOAD, *argv])
    args.func(args)


@pytest.mark.parametrize(("argv", "message"), [
    ((), "the controller is missing: give --controller COMMAND"),
    (("--controller", "python op.py", "--identity", SA), "not both"),
    (("--controller", "python op.py", "--controller-pods", "app=x"),
     "--controller-pods goes with --identity"),
    (("--identity", SA, "--user", "me"), "--user goes with --controller"),
    (("--identity", SA, "--group", "g", "--nodes", "1"), "--group goes with --controller"),
    (("--identity", SA), "--identity needs --nodes 1 or more"),
    (("--identity", " ", "--nodes", "1"), "--identity: give the controller's user"),
    (("--identity", SA, "--nodes", "1", "--controller-pods", "app in ("),
     "--controller-pods: unable to parse label selector"),
    (("--identity", SA, "--nodes", "1", "--kinds", "crash"),
     "--kinds crash with --identity needs --controller-pods"),
])
def test_ct2_explore_run_takes_exactly_one_form_of_the_controller(
        argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CliError) as err:
        _run(*argv)
    assert message in str(err.value)


def test_ct2_identity_without_controller_pods_plans_no_crash_test_and_says_why() -> None:
    kinds, note = controller_form(controller=None, identity=SA, controller_pods=None,
                                  user=None, nodes=1, kinds=list(KINDS))
    assert kinds == ["stale-view", "missed-event"]
    assert note == ("no crash tests: without --controller-pods explore does not know which "
                    "pod is the controller")
    kinds, note = controller_form(controller=None, identity=SA, controller_pods="app=x",
                                  user=None, nodes=1, kinds=list(KINDS))
    assert kinds == list(KINDS) and note == ""
    kinds, note = controller_form(controller="python op.py", identity=None,
                                  controller_pods=None, user="me", nodes=0, kinds=["crash"])
    assert kinds == ["crash"] and note == ""


def test_ct2_identity_help_says_a_node_is_needed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["explore", "run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--identity USER" in text and "--nodes 1 or more" in text
    assert "--controller-pods SELECTOR" in text


def test_ct2_a_saved_reference_keeps_the_identity_for_replay(tmp_path: Path) -> None:
    opts = Options(workload=load_workload(Path(WORKLOAD)), controller="", user=SA,
                   groups=(), nodes=1, identity=SA, controller_pods="app=inpod-operator",
                   out=tmp_path)
    saved = tmp_path / "reference.json"
    saved.write_text(json.dumps({"options": opts.to_json(), "entries": [], "startSeq": 0,
                                 "snapshot": {}, "mask": []}))
    again, *_ = load_reference(saved)
    assert (again.identity, again.controller_pods, again.user, again.nodes) == (
        SA, "app=inpod-operator", SA, 1)
    # a reference saved before --identity existed loads as the process form
    old = opts.to_json()
    del old["identity"], old["controllerPods"]
    saved.write_text(json.dumps({"options": old, "entries": [], "startSeq": 0,
                                 "snapshot": {}, "mask": []}))
    again, *_ = load_reference(saved)
    assert (again.identity, again.controller_pods) == ("", "")


def test_ct2_inpod_example_ships_its_script_unchanged_and_names_its_identity() -> None:
    docs = list(yaml.safe_load_all((INPOD / "operator.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs}
    assert kinds["ConfigMap"]["data"]["mirror.py"] == (INPOD / "mirror.py").read_text()
    pod = kinds["Deployment"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"app": "inpod-operator"}
    assert kinds["Deployment"]["spec"]["replicas"] == 1
    assert pod["spec"]["serviceAccountName"] == kinds["ServiceAccount"]["metadata"]["name"]
    workload = load_workload(INPOD / "workload.yaml")
    assert SA == (f"system:serviceaccount:{workload.namespace}:"
                  f"{kinds['ServiceAccount']['metadata']['name']}")
    assert kinds["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "operator", "namespace": workload.namespace}]
