"""The Textual user interface: the app, its widgets and their stylesheets."""
