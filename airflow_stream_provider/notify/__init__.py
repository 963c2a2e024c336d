"""Notifications: the message of reference 000, the durable outbox, and WebSocket delivery."""
