"""What to change: advice per table x backend x SM, suggested rules, the pin a rule needs, the release search."""
