"""Real-kernel experiments in network namespaces (root only): the kit's oracle and the
notebooks' "try it on a real kernel" sections."""
from .safety import REFUSAL, LabInterrupted, LabUnavailable, check_available, sweep
from .topology import LabSettings
from .runner import LabResult, load_trace, run_lab

__all__ = ["REFUSAL", "LabInterrupted", "LabUnavailable", "check_available", "sweep",
           "LabSettings", "LabResult", "load_trace", "run_lab"]
