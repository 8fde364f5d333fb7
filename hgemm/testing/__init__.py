"""Test and demo support that the product never imports: a scripted OpenAI-compatible server on loopback
(`replay_server`) and synthetic archive rows (`synthetic`)."""
