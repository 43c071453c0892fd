"""The dashboard side: Streamlit session, access, link state, forms and the job panel.

Only app.py, views/ and this package import Streamlit; engine/present/ stays pure and
store/ never reaches up here."""
