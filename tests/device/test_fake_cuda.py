"""CPU tensors that report a CUDA device (device/fake_cuda.py): what reports
cuda and what stays on the CPU, and that values stay real."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from hprobe.device.classify import classify
from hprobe.device.fake_cuda import cuda_tensors, reports_cuda
from hprobe.model.outcome import Cause


@pytest.fixture
def maker(tmp_path):
    """A module standing for a probe's own code: what it makes reports cuda."""
    (tmp_path / "maker.py").write_text(
        "import torch\n\ndef make():\n    return torch.arange(6, dtype=torch.int32).view(2, 3)\n"
    )
    spec = importlib.util.spec_from_file_location("hprobe_test_maker", tmp_path / "maker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tmp_path, module


def test_what_the_probe_makes_reports_cuda_with_real_values(maker):
    directory, module = maker
    with cuda_tensors(str(directory)):
        made = module.make()
        assert made.is_cuda and made.device == torch.device("cuda", 0) and made.get_device() == 0
        assert made.sum().item() == 15 and made[:, 1].tolist() == [1, 4]  # values and slicing are real
        derived = made * 2
        assert derived.is_cuda  # what is computed from it is where it is
        elsewhere = torch.zeros(3)  # made here, not by the probe's code: a CPU tensor, as on the GPU machine
        assert not elsewhere.is_cuda and elsewhere.device.type == "cpu"
        asked = torch.empty(4, device="cuda")  # asked for on cuda by anyone: reports it
        assert asked.is_cuda and asked.numel() == 4
        moved = elsewhere.to("cuda")
        assert moved.is_cuda and elsewhere.cuda().is_cuda and not moved.is_cpu
        back = made.cpu()  # copied to the host: a CPU tensor again, as on the GPU machine
        assert back.device.type == "cpu" and back.is_cpu and not back.is_cuda
        assert made.to("cpu").device.type == "cpu" and made.to(device="cpu").device.type == "cpu"
        assert made.to(torch.float32).is_cuda  # a dtype change stays where it is
    after = module.make()
    assert not after.is_cuda  # nothing outlives the context


def test_inputs_handed_over_report_cuda():
    q, (kv,) = reports_cuda((torch.ones(2), [torch.zeros(1)]))
    assert q.is_cuda and kv.is_cuda and reports_cuda({"x": torch.ones(1)})["x"].is_cuda
    assert reports_cuda(3) == 3


def test_a_call_that_needs_the_cuda_runtime_is_this_machines():
    try:
        torch.cuda.current_stream()
    except (AssertionError, RuntimeError) as exc:
        result = classify(exc, "/nonexistent/flashinfer/")
    else:
        pytest.skip("this torch has CUDA")
    assert not result.validator and result.cause == Cause.DEVICE.value and "CUDA runtime" in (result.reason or "")
