"""The HTTP routes, one router per resource. ``api/app.py`` assembles them into the FastAPI app."""
