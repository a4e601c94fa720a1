"""The telemetry link: UART, framing, command handling and the protocol definition."""
