"""Which controllers exist and how each is built: the `--controllers` flag picks from here.

One entry per controller name (kube-controller-manager's names where it has one; `fencing`
is Skiff's own). Adding a controller is one more `ControllerSpec` below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skiff.controller_manager.attachdetach import AttachDetachController
from skiff.controller_manager.bootstrap import BootstrapSigner, TokenCleaner
from skiff.controller_manager.certificates import (
    CsrApprovingController,
    CsrCleanerController,
    CsrSigningController,
)
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.cronjob import CronJobController
from skiff.controller_manager.daemonset import DaemonSetController
from skiff.controller_manager.deployment import DeploymentController
from skiff.controller_manager.disruption import DisruptionController
from skiff.controller_manager.endpoint import EndpointsController
from skiff.controller_manager.endpointslice import EndpointSliceController
from skiff.controller_manager.fencing import FencingController
from skiff.controller_manager.garbagecollector import GarbageCollector
from skiff.controller_manager.job import JobController
from skiff.controller_manager.namespace import NamespaceController
from skiff.controller_manager.nodeipam import NodeIpamController
from skiff.controller_manager.nodelifecycle import (
    NodeLifecycleController,
    TaintEvictionController,
)
from skiff.controller_manager.podautoscaler import HorizontalController
from skiff.controller_manager.podgc import PodGCController
from skiff.controller_manager.replicaset import ReplicaSetController, ReplicationManager
from skiff.controller_manager.resourcequota import ResourceQuotaController
from skiff.controller_manager.rootcacertpublisher import RootCACertPublisher
from skiff.controller_manager.serviceaccount import ServiceAccountsController
from skiff.controller_manager.statefulset import StatefulSetController
from skiff.controller_manager.volumebinding import VolumeBindingController
from skiff.settings import SettingsError


@dataclass(frozen=True)
class ControllerSpec:
    name: str
    build: Callable[[ControllerContext], list[Controller]]
    enabled_by_default: bool = True


CONTROLLERS: tuple[ControllerSpec, ...] = (
    ControllerSpec("podgc", lambda ctx: [PodGCController(context=ctx)]),
    ControllerSpec("nodelifecycle", lambda ctx: [NodeLifecycleController(context=ctx),
                                                 TaintEvictionController(context=ctx)]),
    ControllerSpec("replicaset", lambda ctx: [ReplicaSetController(context=ctx)]),
    ControllerSpec("replicationcontroller", lambda ctx: [ReplicationManager(context=ctx)]),
    ControllerSpec("deployment", lambda ctx: [DeploymentController(context=ctx)]),
    ControllerSpec("garbagecollector", lambda ctx: [GarbageCollector(context=ctx)]),
    ControllerSpec("endpoint", lambda ctx: [EndpointsController(context=ctx)]),
    ControllerSpec("endpointslice", lambda ctx: [EndpointSliceController(context=ctx)]),
    ControllerSpec("daemonset", lambda ctx: [DaemonSetController(context=ctx)]),
    ControllerSpec("job", lambda ctx: [JobController(context=ctx)]),
    ControllerSpec("cronjob", lambda ctx: [CronJobController(context=ctx)]),
    ControllerSpec("namespace", lambda ctx: [NamespaceController(context=ctx)]),
    ControllerSpec("statefulset", lambda ctx: [StatefulSetController(context=ctx)]),
    ControllerSpec("disruption", lambda ctx: [DisruptionController(context=ctx)]),
    ControllerSpec("fencing", lambda ctx: [FencingController(context=ctx)]),
    ControllerSpec("attachdetach", lambda ctx: [AttachDetachController(context=ctx)]),
    ControllerSpec("nodeipam", lambda ctx: [NodeIpamController(context=ctx)]),
    ControllerSpec("persistentvolume-binder",
                   lambda ctx: [VolumeBindingController(context=ctx)]),
    ControllerSpec("serviceaccount", lambda ctx: [ServiceAccountsController(context=ctx)]),
    ControllerSpec("resourcequota", lambda ctx: [ResourceQuotaController(context=ctx)]),
    ControllerSpec("root-ca-cert-publisher", lambda ctx: [RootCACertPublisher(context=ctx)]),
    ControllerSpec("horizontalpodautoscaling",
                   lambda ctx: [HorizontalController(context=ctx)]),
    ControllerSpec("csrsigning", lambda ctx: [CsrSigningController(context=ctx)]),
    ControllerSpec("csrapproving", lambda ctx: [CsrApprovingController(context=ctx)]),
    ControllerSpec("csrcleaner", lambda ctx: [CsrCleanerController(context=ctx)]),
    # off by default, as in kube-controller-manager; `skiff up` enables them (SPEC JN3)
    ControllerSpec("tokencleaner", lambda ctx: [TokenCleaner(context=ctx)],
                   enabled_by_default=False),
    ControllerSpec("bootstrapsigner", lambda ctx: [BootstrapSigner(context=ctx)],
                   enabled_by_default=False),
)


def select_controllers(names: Sequence[str]) -> list[ControllerSpec]:
    """kube-controller-manager's `--controllers`: `*` = the defaults, `name` enables one,
    `-name` disables one. Unknown names are an error that lists the known ones."""
    known = {spec.name: spec for spec in CONTROLLERS}
    wanted = [n.strip() for n in names if n.strip()] or ["*"]
    unknown = [n for n in wanted if n.lstrip("-") not in known and n != "*"]
    if unknown:
        raise SettingsError(f"--controllers: unknown controller(s) {', '.join(unknown)}; "
                            f"known: {', '.join(known)} (or * for all)")
    enabled: list[ControllerSpec] = []
    for spec in CONTROLLERS:
        if f"-{spec.name}" in wanted:
            continue
        if spec.name in wanted or ("*" in wanted and spec.enabled_by_default):
            enabled.append(spec)
    return enabled
