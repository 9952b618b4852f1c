"""The typed-edge kind: its declaration, commands, projection and reads."""
