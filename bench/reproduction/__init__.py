"""The committed reproduction: finished runs exported to a CSV (:mod:`.export`), compared
with the paper cell by cell (:mod:`.compare`), and rendered as tables and a README
(:mod:`.render`); ``bench reproduce`` drives them."""
