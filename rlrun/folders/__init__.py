"""folders"""
