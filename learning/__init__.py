"""Component-centric agent learning (Selection / Optimization / Evaluation)."""
