"""quarantine"""
