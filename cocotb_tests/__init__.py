"""Cocotb benches for the rbscope gateware.

The benches in this package run inside a simulator (Icarus Verilog or Verilator), never directly
under pytest. The pytest files in ``tests/`` start them with
:func:`cocotb_tests.runner.run_bench`.
"""
