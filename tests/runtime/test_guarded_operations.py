"""Guarded operations and cancellation: an env/model awaited by the driver behaves as under a
plain ``await`` (its own ``asyncio.timeout``/``wait_for`` work), a ``CancelledError`` it raises
by itself is its failure, and only the driver task's own cancellation ends the run as one."""

from __future__ import annotations

import asyncio
import sys

import pytest
from _runtime_fakes import CountingEnv, EchoModel, RecordingHooks, single_env_spec

from rlmesh_gym.proto import model_pb2
from rlmesh_gym.runtime import (
    EnvRpcError,
    ModelRpcError,
    OperationTimeoutError,
    RuntimeDriver,
    RuntimeLimits,
)

needs_timeout = pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is new in 3.11")


class TimeoutTolerantModel(EchoModel):
    """Waits under its own short asyncio.timeout (like a retry loop around an RPC), then answers."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts = 0

    async def predict(self, request: model_pb2.PredictRequest):
        try:
            async with asyncio.timeout(0.001):
                await asyncio.sleep(3600)
        except TimeoutError:
            self.timeouts += 1
        return await super().predict(request)


@needs_timeout
def test_an_asyncio_timeout_inside_the_model_is_its_own_business() -> None:
    async def scenario():
        plain = TimeoutTolerantModel()
        answer = await plain.predict(model_pb2.PredictRequest())
        model, hooks = TimeoutTolerantModel(), RecordingHooks()
        report = await RuntimeDriver(single_env_spec(), CountingEnv(), model, hooks).run()
        return answer, model, hooks, report, asyncio.current_task().cancelling()

    answer, model, hooks, report, cancelling = asyncio.run(scenario())
    assert type(answer.response) is model_pb2.PredictResponse  # the plain await answers
    assert (report.total_steps, report.total_episodes) == (1, 1)
    assert model.timeouts == 1 and len(model.requests) == 1
    assert not hooks.named("session_failed")
    assert cancelling == 0  # the timeout took its cancellation request back


@needs_timeout
def test_an_asyncio_timeout_inside_the_env_step_and_reset_is_its_own_business() -> None:
    class Patient(CountingEnv):
        async def _wait(self):
            try:
                async with asyncio.timeout(0.001):
                    await asyncio.Event().wait()
            except TimeoutError:
                self.log.append(("own timeout",))

        async def reset(self, request):
            await self._wait()
            return await super().reset(request)

        async def step(self, request):
            await self._wait()
            return await super().step(request)

    env = Patient(terminal_after=2)
    report = asyncio.run(RuntimeDriver(single_env_spec(), env, EchoModel()).run())
    assert report.total_steps == 2
    assert env.log.count(("own timeout",)) == 3  # reset + 2 steps


def test_asyncio_wait_for_inside_operations() -> None:
    class WaitForModel(EchoModel):
        def __init__(self) -> None:
            super().__init__()
            self.timeouts = 0

        async def predict(self, request):
            try:
                await asyncio.wait_for(asyncio.sleep(3600), 0.001)
            except asyncio.TimeoutError:  # the builtin TimeoutError from 3.11
                self.timeouts += 1
            return await super().predict(request)

    class WaitForEnv(CountingEnv):
        async def step(self, request):
            done = await asyncio.wait_for(asyncio.sleep(0, result="slept"), 10)
            self.log.append(("wait_for", done))
            return await super().step(request)

    model, env = WaitForModel(), WaitForEnv(terminal_after=2)
    report = asyncio.run(RuntimeDriver(single_env_spec(), env, model).run())
    assert (report.total_steps, model.timeouts) == (2, 2)
    assert env.log.count(("wait_for", "slept")) == 2


@needs_timeout
def test_an_unhandled_timeout_inside_the_model_is_a_model_error() -> None:
    class Impatient(EchoModel):
        async def predict(self, request):
            async with asyncio.timeout(0.001):
                await asyncio.sleep(3600)

    hooks = RecordingHooks()
    with pytest.raises(ModelRpcError) as caught:
        asyncio.run(RuntimeDriver(single_env_spec(), CountingEnv(), Impatient(), hooks).run())
    assert type(caught.value.__cause__) is TimeoutError
    assert caught.value.message == "TimeoutError"
    assert [e.reason for e in hooks.named("session_failed")] == [str(caught.value)]


def test_the_driver_limit_still_applies_to_an_operation_with_its_own_timeouts() -> None:
    class Retrying(EchoModel):
        async def predict(self, request):
            while True:
                try:
                    await asyncio.wait_for(asyncio.sleep(3600), 0.001)
                except asyncio.TimeoutError:
                    continue

    spec = single_env_spec(limits=RuntimeLimits(model_predict_timeout=0.02))
    with pytest.raises(OperationTimeoutError) as caught:
        asyncio.run(RuntimeDriver(spec, CountingEnv(), Retrying()).run())
    assert caught.value.operation == "model.predict"


# -- a CancelledError raised by the operation itself ------------------------------------------------


class CancelsItself(EchoModel):
    def __init__(self, suspend: bool) -> None:
        super().__init__()
        self.suspend = suspend

    async def predict(self, request):
        if self.suspend:
            await asyncio.sleep(0)
            await asyncio.sleep(0.001)
        raise asyncio.CancelledError("model gave up")


@pytest.mark.parametrize("suspend", [False, True], ids=["synchronous", "after-suspending"])
def test_a_cancelled_error_raised_by_the_model_is_a_model_error(suspend):
    hooks = RecordingHooks()
    with pytest.raises(ModelRpcError) as caught:
        asyncio.run(RuntimeDriver(single_env_spec(), CountingEnv(), CancelsItself(suspend), hooks).run())
    assert type(caught.value.__cause__) is asyncio.CancelledError
    assert caught.value.message == "model gave up"
    assert [e.reason for e in hooks.named("session_failed")] == [str(caught.value)]


def test_a_cancelled_error_raised_by_the_env_is_an_env_error() -> None:

    class Quits(CountingEnv):
        async def step(self, request):
            await asyncio.sleep(0.001)
            raise asyncio.CancelledError()

    with pytest.raises(EnvRpcError) as caught:
        asyncio.run(RuntimeDriver(single_env_spec(), Quits(), EchoModel()).run())
    assert (caught.value.operation, caught.value.step, caught.value.message) == ("step", 1, "CancelledError")


def test_a_close_that_raises_cancelled_error_is_a_failed_close(caplog) -> None:
    class CloseCancels(EchoModel):
        async def close_route(self, request, timeout):
            await asyncio.sleep(0)
            raise asyncio.CancelledError("close refused")

    report = asyncio.run(RuntimeDriver(single_env_spec(), CountingEnv(), CloseCancels()).run())
    assert report.total_episodes == 1
    assert "model route close failed during route shutdown" in caplog.text
    assert "raised CancelledError: close refused" in caplog.text


# -- the driver task's own cancellation --------------------------------------------------------------


def test_cancelling_the_task_during_a_model_cleanup_still_cancels_the_run():
    cleanups = []

    class CleansUp(EchoModel):
        async def predict(self, request):
            self.requests.append(request)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                await asyncio.sleep(0)  # cleanup that awaits, then lets the cancellation out
                cleanups.append("done")
                raise

    env, model, hooks = CountingEnv(), CleansUp(), RecordingHooks()

    async def scenario():
        task = asyncio.create_task(RuntimeDriver(single_env_spec(), env, model, hooks).run())
        while not model.requests:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert cleanups == ["done"] and env.closed and model.closed
    assert [e.reason for e in hooks.named("session_failed")] == ["runtime driver task was cancelled"]


@needs_timeout
def test_cancelling_the_task_inside_a_model_timeout_cancels_the_run() -> None:
    class LongTimeout(EchoModel):
        async def predict(self, request):
            self.requests.append(request)
            async with asyncio.timeout(3600):  # does not swallow the task's cancellation
                await asyncio.sleep(3600)

    model, hooks = LongTimeout(), RecordingHooks()

    async def scenario():
        task = asyncio.create_task(RuntimeDriver(single_env_spec(), CountingEnv(), model, hooks).run())
        while not model.requests:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert [e.reason for e in hooks.named("session_failed")] == ["runtime driver task was cancelled"]
