"""The controller-manager process: connect, campaign for the Lease, run controllers while
leading.

While this process leads, one set of shared informers and the selected controllers run in
a TaskGroup; losing the lease cancels them all (each drains its in-flight work), and the
process campaigns again with fresh caches, so a former leader never acts on stale state.
Health is SERVING once started, leader or standby, as kube-controller-manager's healthz.
"""

from __future__ import annotations

import asyncio
import logging

from skiff.client import ApiClient, Client
from skiff.client.batch import batching
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    election_client,
)
from skiff.controller_manager.registry import ControllerSpec, select_controllers
from skiff.controller_manager.settings import ControllerManagerSettings
from skiff.service import Service

log = logging.getLogger("skiff.controller_manager")


class ControllerManager:
    """`await ControllerManager(settings=...).run(service)`."""

    def __init__(self, *, settings: ControllerManagerSettings) -> None:
        settings.check()
        self.settings = settings
        self.identity = settings.identity
        self.specs: list[ControllerSpec] = select_controllers(settings.controllers)
        self.election = LeaderElectionConfig(
            namespace=settings.leader_elect_resource_namespace,
            name=settings.leader_elect_resource_name, identity=self.identity,
            lease_duration=settings.leader_elect_lease_duration,
            renew_deadline=settings.leader_elect_renew_deadline,
            retry_period=settings.leader_elect_retry_period)

    async def run(self, service: Service) -> None:
        s = self.settings
        async with ApiClient(s.apiserver, user_agent="skiff-controller-manager",
                             **batching(s.write_batch_size, s.write_batch_delay)) as client:
            await service.ready()
            log.info("controller-manager started", extra={
                "identity": self.identity, "controllers": [c.name for c in self.specs],
                "leaderElect": s.leader_elect})

            async def lead() -> None:
                await self.run_controllers(client)

            if s.leader_elect:
                async with election_client(s.apiserver, self.election,
                                           user_agent="skiff-controller-manager") as lease:
                    elector = LeaderElector(client=lease, config=self.election,
                                            fenced=[client])
                    await elector.run(lead=lead, stop=service.stop)
                return
            leading = asyncio.create_task(lead(), name="controllers")
            stopping = asyncio.create_task(service.stop.wait(), name="stop")
            await asyncio.wait({leading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            for task in (leading, stopping):
                task.cancel()
            await asyncio.gather(leading, stopping, return_exceptions=True)
            if leading.done() and not leading.cancelled() and leading.exception():
                raise RuntimeError("the controllers failed") from leading.exception()

    async def run_controllers(self, client: Client) -> None:
        """Build fresh informers and controllers and run them until cancelled."""
        informers = SharedInformers(client)
        context = ControllerContext(client=client, informers=informers,
                                    settings=self.settings, host=self.identity)
        controllers = [c for spec in self.specs for c in spec.build(context)]
        async with asyncio.TaskGroup() as tg:
            tg.create_task(informers.run(), name="informers")
            for controller in controllers:
                tg.create_task(controller.run(), name=f"controller:{controller.name}")
