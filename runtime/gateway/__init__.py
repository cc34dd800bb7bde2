"""The scoped CDP gateway: a per-ComputerSession CDP endpoint exposing exactly one bound page target."""

from runtime.gateway.gateway import Absorbed, GatewayError, GatewayEvent, RefusedCommand, ScopedGateway

__all__ = ["Absorbed", "GatewayError", "GatewayEvent", "RefusedCommand", "ScopedGateway"]
