"""fleet"""
