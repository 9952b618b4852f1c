"""The policy kind: its declaration, applying a version, and the policy in force."""
