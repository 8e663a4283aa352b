#!/usr/bin/env python3
"""Writes the corpus of real-world CSV variants of wine (../../../datasets/
testdata/wine.csv) and their schemas, and manifest.json that says, for each,
whether it reads to the same exact statistics as the clean file (with which
schema) or is refused with an error naming line, column and what to change.

wine.schema.json is `fedpca schema infer --data wine.csv --id wine` (the
clean file's mean and std); every other schema adds reading options only,
so the centers and scales, and hence the integers, are the same.
Run: python3 gen.py (deterministic; no randomness)."""
import csv, gzip, io, json, os

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "../../../datasets/testdata/wine.csv")
with open(SRC, newline="") as f:
    rows = list(csv.reader(f))
header, body = rows[0], rows[1:]
base = json.load(open(os.path.join(HERE, "wine.schema.json")))
manifest = []


def write(name, text, mode="w"):
    p = os.path.join(HERE, name)
    if name.endswith(".gz"):
        with open(p, "wb") as f:
            # mtime 0: the bytes do not depend on the day.
            with gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as z:
                z.write(text.encode())
    else:
        with open(p, "w", newline="", encoding="utf-8") as f:
            f.write(text)


def to_csv(hdr, rs, delim=",", crlf=False, quote=csv.QUOTE_MINIMAL):
    out = io.StringIO()
    w = csv.writer(out, delimiter=delim, lineterminator="\r\n" if crlf else "\n", quoting=quote)
    w.writerow(hdr)
    w.writerows(rs)
    return out.getvalue()


def schema(name, **opts):
    s = json.loads(json.dumps(base))
    feats = opts.pop("features", None)
    if feats:
        s["features"] = feats(s["features"])
    s.update(opts)
    write(name, json.dumps(s, indent=1) + "\n")
    return name


def equal(file, sch, note, extra_rows=0):
    manifest.append({"file": file, "schema": sch, "expect": "equal", "note": note, "rows_left_out": extra_rows})


def refused(file, sch, note, line, column, contains):
    manifest.append({"file": file, "schema": sch, "expect": "refused", "note": note, "line": line, "column": column, "contains": contains})


clean = to_csv(header, body)
write("clean.csv", clean)
equal("clean.csv", "wine.schema.json", "the clean file")

write("bom.csv", "\ufeff" + clean)
equal("bom.csv", "wine.schema.json", "Excel 'CSV UTF-8': a byte order mark")

write("crlf.csv", to_csv(header, body, crlf=True))
equal("crlf.csv", "wine.schema.json", "Windows line ends")

write("semicolon.csv", to_csv(header, body, delim=";"))
equal("semicolon.csv", "wine.schema.json", "';' delimiter, detected")

write("tab.tsv", to_csv(header, body, delim="\t"))
equal("tab.tsv", "wine.schema.json", "tab delimiter, detected")

write("header_spaces.csv", to_csv([" " + h + "  " for h in header], body))
equal("header_spaces.csv", "wine.schema.json", "spaces around the header names")

# Quoted fields, with an extra free-text column (commas, quotes, a line
# break) that the schema does not name: it is ignored.
qh = ["patient note"] + header
qb = [[f'visit {i}, said "fine"\nsecond line'] + r for i, r in enumerate(body)]
write("quoted.csv", to_csv(qh, qb, quote=csv.QUOTE_ALL))
equal("quoted.csv", "wine.schema.json", "every field quoted; an ignored free-text column with commas, quotes and line breaks")

write("wine.csv.gz", clean)
equal("wine.csv.gz", "wine.schema.json", "gzip, by extension and magic bytes")

# Missing values: extra rows with NA, empty, NaN, null cells, dropped.
extra = []
for i, tok in enumerate(["NA", "", "NaN", "null", "N/A", "?", "NULL", "nan"]):
    r = list(body[i])
    r[i % 13] = tok
    extra.append(r)
write("missing_drop.csv", to_csv(header, body[:50] + extra + body[50:]))
equal("missing_drop.csv", schema("missing_drop.schema.json", missing={"policy": "drop"}),
      "NA/empty/NaN/null cells, rows dropped by the schema-wide policy", extra_rows=len(extra))
refused("missing_drop.csv", "wine.schema.json", "the same without a missing policy", 52, "alcohol",
        'add "missing"')

# Fill: magnesium's 88s written as NA and filled with 88.
mg = header.index("magnesium")
fb = [[("NA" if (j == mg and v == "88") else v) for j, v in enumerate(r)] for r in body]
write("missing_fill.csv", to_csv(header, fb))
equal("missing_fill.csv", schema("missing_fill.schema.json",
      features=lambda fs: [dict(f, missing={"policy": "fill", "fill": "88"}) if f["name"] == "magnesium" else f for f in fs]),
      "NA in magnesium filled with the public value 88")

# Decimal comma (with ';', as European Excel writes).
dc = [[v.replace(".", ",") for v in r] for r in body]
write("decimal_comma.csv", to_csv(header, dc, delim=";"))
equal("decimal_comma.csv", schema("decimal_comma.schema.json", decimal_comma=True), "decimal commas with ';'")
refused("decimal_comma.csv", "wine.schema.json", "decimal commas without decimal_comma", 2, "alcohol", "decimal_comma")

# Mixed-case, padded labels.
ml = [r[:-1] + [[" Class_0", "CLASS_1 ", "class_2"][int(r[-1][-1])] if i % 2 else r[-1].upper()] for i, r in enumerate(body)]
write("mixed_case_labels.csv", to_csv(header, ml))
equal("mixed_case_labels.csv", schema("mixed_case_labels.schema.json", trim=True, ignore_case=True),
      "labels ' Class_0', 'CLASS_1 ': trim and ignore_case")
refused("mixed_case_labels.csv", "wine.schema.json", "the same without trim/ignore_case", 2, "label",
        "not one of the schema's classes")

# Categorical text: wine's class written as text in a column 'cultivar'
# ("Barolo", " grignolino", "BARBERA") one-hot encoded, against the clean
# file with the indicators as numbers.
names = ["Barolo", "Grignolino", "Barbera"]
oh_header = header[:-1] + ["cultivar=barbera", "cultivar=barolo", "cultivar=grignolino", "label"]
oh_body, cat_body = [], []
for i, r in enumerate(body):
    k = int(r[-1][-1])
    ind = ["1" if names[k].lower() == c else "0" for c in ["barbera", "barolo", "grignolino"]]
    oh_body.append(r[:-1] + ind + [r[-1]])
    txt = [names[k], " " + names[k].lower(), names[k].upper()][i % 3]
    cat_body.append(r[:-1] + [txt, r[-1]])
write("onehot_clean.csv", to_csv(oh_header, oh_body))
n = len(body)
def ind_feature(c, numeric):
    cnt = sum(1 for r in oh_body if r[oh_header.index("cultivar=" + c)] == "1")
    f = {"name": "cultivar=" + c}
    if not numeric:
        f.update({"column": "cultivar", "category": c})
    # centers and scales as schema infer writes them (mean, population std)
    p = cnt / n
    f.update({"center": repr(p), "scale": repr((p * (1 - p)) ** 0.5)})
    return f
schema("onehot_clean.schema.json", features=lambda fs: fs + [ind_feature(c, True) for c in ["barbera", "barolo", "grignolino"]])
write("categorical.csv", to_csv(header[:-1] + ["cultivar", "label"], cat_body))
schema("categorical.schema.json", trim=True, ignore_case=True,
       categorical=[{"column": "cultivar", "categories": ["barbera", "barolo", "grignolino"]}],
       features=lambda fs: fs + [ind_feature(c, False) for c in ["barbera", "barolo", "grignolino"]])
manifest.append({"file": "categorical.csv", "schema": "categorical.schema.json", "expect": "equal_to",
                 "clean": "onehot_clean.csv", "clean_schema": "onehot_clean.schema.json",
                 "note": "categorical text column one-hot encoded from the public list (trim, ignore_case)"})
bad_cat = [r[:-2] + (["Nebbiolo"] if i == 3 else [r[-2]]) + [r[-1]] for i, r in enumerate(cat_body)]
write("categorical_unknown.csv", to_csv(header[:-1] + ["cultivar", "label"], bad_cat))
refused("categorical_unknown.csv", "categorical.schema.json", "a category not in the public list", 5, "cultivar",
        "not one of the column's categories")

# Spreadsheet export: BOM, CRLF, ';', decimal commas, a header with spaces
# inside a name ('Malic Acid') read through the feature's column option.
xh = [("Malic Acid" if h == "malic_acid" else h) for h in header]
write("excel_export.csv", "\ufeff" + to_csv(xh, dc, delim=";", crlf=True))
equal("excel_export.csv", schema("excel_export.schema.json", decimal_comma=True,
      features=lambda fs: [dict(f, column="Malic Acid") if f["name"] == "malic_acid" else f for f in fs]),
      "Excel: BOM, CRLF, ';', decimal commas, a column named 'Malic Acid'")
refused("excel_export.csv", "decimal_comma.schema.json", "the same without the column option", 1, "malic_acid",
        'set the feature\'s "column" to "Malic Acid"')

# A ragged row.
rg = body[:9] + [body[9][:-3]] + body[9:]
write("ragged.csv", to_csv(header, rg))
refused("ragged.csv", "wine.schema.json", "a row with too few fields (skipped)", 11, "", "wrong number of fields")

with open(os.path.join(HERE, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
    f.write("\n")
