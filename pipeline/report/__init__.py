"""The sampling report: what the corpus is and what each sampling choice would do."""
