"""The scoped CDP gateway: a per-ComputerSession CDP endpoint exposing exactly one bound page target."""

from runtime.gateway.facade import ScopedGateway
from runtime.gateway.records import Absorbed, GatewayError, GatewayEvent, RefusedCommand

__all__ = ["Absorbed", "GatewayError", "GatewayEvent", "RefusedCommand", "ScopedGateway"]
