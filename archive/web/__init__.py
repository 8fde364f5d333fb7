"""Browsing the archive: a read-only web view (`hgemm serve`) and a static report (`hgemm report`).

`data` holds the parameterised reads, `svg` the plots, `app` the Starlette application, `report` the static
overview; templates are in `templates/`, the stylesheet in `static/`.
"""
