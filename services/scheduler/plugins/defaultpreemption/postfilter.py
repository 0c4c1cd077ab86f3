"""DefaultPreemption PostFilter: run the preemption Evaluator and prefix its message with
"preemption: ", as Kubernetes words the pod's Unschedulable condition."""

from __future__ import annotations

from skiff.scheduler.framework import CycleState, PostFilterResult, Status
from skiff.scheduler.podinfo import PodInfo
from skiff.scheduler.preemption import Evaluator


class DefaultPreemption:
    name = "DefaultPreemption"

    def __init__(self, *, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    async def post_filter(self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
                          ) -> tuple[PostFilterResult | None, Status]:
        result, status = await self.evaluator.preempt(state, pod, statuses)
        if status.message:
            return result, Status(status.code, ("preemption: " + status.message,),
                                  status.plugin)
        return result, status
