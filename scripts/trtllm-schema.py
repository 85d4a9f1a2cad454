#!/usr/bin/env python3
"""Writes a JSON catalog of TensorRT-LLM's LLM API config schema on stdout.

Usage: python3 scripts/trtllm-schema.py PATH/TO/tensorrt_llm/llmapi/llm_args.py \\
           --commit <sha> --label <label> \\
           > crates/srt/src/engine/trtllm/schema/llm-api-<label>.json

Why the source and not the package: the LLM API's arguments (what
`trtllm-serve --extra_llm_api_options` and `dynamo.trtllm --extra-engine-args`
read from a YAML file) are pydantic models, `TorchLlmArgs` and the models its
fields name. The `tensorrt_llm` wheel cannot be installed without CUDA and is
only published on NVIDIA's own index, so it cannot be imported here. This
script therefore never imports the module: it reads the pinned release's
`llm_args.py` with `ast` (standard library only) and records, in the output,
the commit the file came from and the sha256 of its bytes, so the catalog can
be regenerated and checked against the same source.

What is read (module level, and classes nested in classes):
  models  every class deriving, directly or through other classes of the file,
          from pydantic's `BaseModel`, from `StrictBaseModel` (TensorRT-LLM's
          `llmapi/utils.py`: a BaseModel with `extra="forbid"`) or from another
          model of the file. Fields are flattened: a subclass sees its bases'
          fields, its own declaration of a name replacing the base's.
  enums   every class deriving from `Enum`, `StrEnum`, `IntEnum` (or another
          enum of the file): its members' values, a member assigned a constant
          giving that constant, one assigned anything else its name.
  type aliases  `X: TypeAlias = ...` and `X = Union[...]`/`Literal[...]`/
          `Annotated[...]`/`<model>` at module level, resolved where used.

A field is a class-level annotated name (`name: T = Field(...)`, `name: T =
value` or `name: T`), except `ClassVar[...]`s, `PrivateAttr(...)`s, names that
start with `_`, and `model_config`. For each:
  type         a type tree, {"kind": K, ...} with K one of
               int | float | bool | str | null | any        (scalars; int and
                   float may carry "min"/"max", from PositiveInt (min 1),
                   NonNegativeInt (min 0), NonNegativeFloat (min 0), or the
                   field's own ge=/gt=/le=/lt=, gt on a float giving
                   "exclusive_min": true; "any" carries "note", the annotation's
                   source, when it names something defined elsewhere: a
                   tensor dtype, a tokenizer object, a binding enum, Path...)
               list   "items"  (List, list, Set, Tuple: a Tuple's items are the
                   union of its arguments)
               dict   "values" (and "keys")
               model  "name"   (a model of this catalog)
               enum   "name"   (an enum of this catalog)
               literal "values"
               union  "of"     (Optional[X] and `X | None` are X or null; a
                   discriminated union carries "discriminator")
               Annotated[X, ...] is X; a string annotation is parsed first.
  default      the default when it is a literal (or a constant arithmetic
               expression, or a member of an enum of the file: its value);
               otherwise null, with "default_expr" its source text
               (e.g. "default_factory=KvCacheConfig")
  required     true when the field has neither a default nor a default_factory
  status       Field(status=...): "prototype", "beta" or "deprecated", if given
  deprecated   true when Field(deprecated=...) is given
  aliases      names from alias= or validation_alias= (a string or
               AliasChoices(...)); "alias_only": true when alias= replaces the
               name (pydantic then reads only the alias)
  constraints  Field's ge/gt/le/lt/min_length/max_length, when constants
  description  the first line of description=, when a string (200 chars at most)
  defined_in   the class whose body declares the field
Per model: "fields", "bases" (the direct bases' names), "extra" ("forbid" when
it derives from StrictBaseModel or its model_config says extra="forbid",
"allow" for extra="allow", else "ignore": what pydantic does with a key the
model has no field for).

Output: {"program": "tensorrt-llm-llm-api", "version": <label>, "source":
{"repo", "path", "commit", "sha256"}, "root": "TorchLlmArgs", "models",
"enums", "type_aliases"}; keys sorted, one-space indent, a trailing newline:
the same source gives the same bytes.

The catalog in the repo (crates/srt/src/engine/trtllm/schema/
llm-api-main-0004396.json) was made from NVIDIA/TensorRT-LLM at commit
0004396720054fd8e205cbf616f21f0b57c6b412 (main, after the 1.3 release
candidates). No `tensorrt_llm/version.py` of that commit could be read, so its
release number is not known; the label is `main-0004396` (branch and short
commit) instead.
"""

import argparse
import ast
import hashlib
import json
import sys

REPO = "NVIDIA/TensorRT-LLM"
PATH = "tensorrt_llm/llmapi/llm_args.py"
ROOT = "TorchLlmArgs"

PYDANTIC_BASES = {"BaseModel": "ignore", "StrictBaseModel": "forbid"}
ENUM_BASES = {"Enum", "StrEnum", "IntEnum"}
SCALARS = {
    "int": {"kind": "int"},
    "StrictInt": {"kind": "int"},
    "float": {"kind": "float"},
    "StrictFloat": {"kind": "float"},
    "bool": {"kind": "bool"},
    "StrictBool": {"kind": "bool"},
    "str": {"kind": "str"},
    "StrictStr": {"kind": "str"},
    "PositiveInt": {"kind": "int", "min": 1},
    "NonNegativeInt": {"kind": "int", "min": 0},
    "NonNegativeFloat": {"kind": "float", "min": 0},
    "PositiveFloat": {"kind": "float", "min": 0, "exclusive_min": True},
    "Any": {"kind": "any"},
}
LISTS = {"List", "list", "Set", "set", "FrozenSet", "frozenset", "Tuple", "tuple",
         "Sequence"}
DICTS = {"Dict", "dict", "DefaultDict", "defaultdict"}
FIELD_FUNCS = {"Field", "PydanticField"}


def name_of(node):
    """The dotted name of a Name/Attribute, or None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = name_of(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def subscript_args(node):
    """The arguments of `X[...]` as a list."""
    s = node.slice
    return list(s.elts) if isinstance(s, ast.Tuple) else [s]


def const_value(node):
    """A literal (or constant arithmetic) value, or raise ValueError."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.BinOp) and isinstance(
            node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow, ast.FloorDiv)):
        a, b = const_value(node.left), const_value(node.right)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                   for x in (a, b)):
            raise ValueError("not numeric")
        if isinstance(node.op, ast.Pow) and abs(b) > 64:
            raise ValueError("too large")
        return {
            ast.Add: lambda: a + b,
            ast.Sub: lambda: a - b,
            ast.Mult: lambda: a * b,
            ast.Pow: lambda: a**b,
            ast.FloorDiv: lambda: a // b,
        }[type(node.op)]()
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = const_value(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
    raise ValueError("not a constant")


def is_call_to(node, names):
    return isinstance(node, ast.Call) and name_of(node.func) in names


def kwarg(call, name):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def union_of(members):
    """A union node of `members`, nested unions flattened and duplicates dropped;
    a single member is itself."""
    flat = []
    for m in members:
        for x in (m["of"] if m["kind"] == "union" and "discriminator" not in m
                  else [m]):
            if x not in flat:
                flat.append(x)
    return flat[0] if len(flat) == 1 else {"kind": "union", "of": flat}


class Catalog:

    def __init__(self, source):
        self.source = source
        self.tree = ast.parse(source)
        self.classes = {}  # qualified name -> ClassDef
        self.scope_of = {}  # qualified name -> enclosing class's qualified name
        self.aliases = {}  # module-level alias name -> annotation node
        self._collect(self.tree.body, None)
        for stmt in self.tree.body:
            self._alias(stmt)
        self.models, self.enums = self._kinds()

    # --- collection ---

    def _collect(self, body, outer):
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                q = f"{outer}.{stmt.name}" if outer else stmt.name
                self.classes[q] = stmt
                self.scope_of[q] = outer
                self._collect(stmt.body, q)

    def _alias(self, stmt):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and name_of(stmt.annotation) in ("TypeAlias", "typing.TypeAlias")
                and stmt.value is not None):
            self.aliases[stmt.target.id] = stmt.value
        elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
              and isinstance(stmt.targets[0], ast.Name)):
            value = stmt.value
            head = value.value if isinstance(value, ast.Subscript) else value
            if name_of(head) in ("Union", "Optional", "Literal", "Annotated",
                                 "List", "Dict", "Tuple", "Set"):
                self.aliases[stmt.targets[0].id] = value
            elif isinstance(value, ast.Name) and value.id in self.classes:
                self.aliases[stmt.targets[0].id] = value

    def lookup(self, name, scope):
        """The qualified class `name` means inside class `scope`, or None."""
        while scope is not None:
            q = f"{scope}.{name}"
            if q in self.classes:
                return q
            scope = self.scope_of[scope]
        return name if name in self.classes else None

    def _kinds(self):
        models, enums = {}, set()
        changed = True
        while changed:
            changed = False
            for q, cls in self.classes.items():
                if q in models or q in enums:
                    continue
                scope = self.scope_of[q]
                for b in cls.bases:
                    n = name_of(b)
                    inner = self.lookup(n, scope) if n else None
                    if n in PYDANTIC_BASES or (inner in models):
                        models[q] = None
                        changed = True
                        break
                    if n in ENUM_BASES or n in ("enum.Enum", "enum.StrEnum") or (
                            inner in enums):
                        enums.add(q)
                        changed = True
                        break
        return list(models), sorted(enums)

    # --- types ---

    def src(self, node):
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def type_of(self, node, scope, seen=()):
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {"kind": "null"}
            if isinstance(node.value, str):
                try:
                    parsed = ast.parse(node.value, mode="eval").body
                except SyntaxError:
                    return {"kind": "any", "note": node.value}
                return self.type_of(parsed, scope, seen)
            return {"kind": "any", "note": self.src(node)}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return union_of([self.type_of(node.left, scope, seen),
                             self.type_of(node.right, scope, seen)])
        if isinstance(node, ast.Subscript):
            return self._generic(node, scope, seen)
        n = name_of(node)
        if n is None:
            return {"kind": "any", "note": self.src(node)}
        if n in SCALARS:
            return dict(SCALARS[n])
        if n in ("object", "typing.Any"):
            return {"kind": "any", "note": n}
        if n in LISTS:
            return {"kind": "list", "items": {"kind": "any"}}
        if n in DICTS:
            return {"kind": "dict", "keys": {"kind": "any"}, "values": {"kind": "any"}}
        if n == "None":
            return {"kind": "null"}
        q = self.lookup(n, scope) if "." not in n else self.lookup(n, None)
        if q in self.models:
            return {"kind": "model", "name": q}
        if q in self.enums:
            return {"kind": "enum", "name": q}
        if n in self.aliases and n not in seen:
            return self.type_of(self.aliases[n], None, seen + (n, ))
        return {"kind": "any", "note": self.src(node)}

    def _generic(self, node, scope, seen):
        head = name_of(node.value)
        args = subscript_args(node)
        if head in ("Optional", "typing.Optional"):
            return union_of([self.type_of(args[0], scope, seen), {"kind": "null"}])
        if head in ("Union", "typing.Union"):
            return union_of([self.type_of(a, scope, seen) for a in args])
        if head in ("Literal", "typing.Literal"):
            values = []
            for a in args:
                try:
                    values.append(const_value(a))
                except ValueError:
                    values.append(self.src(a))
            return {"kind": "literal", "values": values}
        if head in ("Annotated", "typing.Annotated"):
            inner = self.type_of(args[0], scope, seen)
            for meta in args[1:]:
                if is_call_to(meta, FIELD_FUNCS):
                    d = kwarg(meta, "discriminator")
                    if d is not None and inner["kind"] == "union":
                        inner = dict(inner)
                        inner["discriminator"] = const_value(d)
                    inner = apply_bounds(inner, meta)
            return inner
        if head in LISTS:
            if head in ("Tuple", "tuple"):
                items = [a for a in args
                         if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
                return {"kind": "list",
                        "items": union_of([self.type_of(a, scope, seen) for a in items])
                        if items else {"kind": "any"}}
            return {"kind": "list", "items": self.type_of(args[0], scope, seen)}
        if head in DICTS:
            return {"kind": "dict",
                    "keys": self.type_of(args[0], scope, seen),
                    "values": self.type_of(args[1], scope, seen)
                    if len(args) > 1 else {"kind": "any"}}
        return {"kind": "any", "note": self.src(node)}

    # --- defaults ---

    def enum_member(self, node, scope):
        """The value of `Enum.MEMBER` when Enum is an enum of the file."""
        if not isinstance(node, ast.Attribute):
            return None
        owner = name_of(node.value)
        q = self.lookup(owner, scope) if owner else None
        if q not in self.enums:
            return None
        members = self.enum_members(q)
        return (True, members[node.attr]) if node.attr in members else None

    def enum_members(self, q):
        members = {}
        for stmt in self.classes[q].body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and not stmt.targets[0].id.startswith("_")):
                name = stmt.targets[0].id
                try:
                    members[name] = const_value(stmt.value)
                except ValueError:
                    members[name] = name
        return members

    def default(self, node, scope, entry):
        try:
            entry["default"] = const_value(node)
            return
        except ValueError:
            pass
        member = self.enum_member(node, scope)
        entry["default"] = member[1] if member else None
        entry["default_expr"] = self.src(node)

    # --- models ---

    def own_fields(self, q):
        cls = self.classes[q]
        scope = q  # names in annotations are looked up from inside the class
        fields = {}
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            ann = stmt.annotation
            ann_head = ann.value if isinstance(ann, ast.Subscript) else ann
            if (name.startswith("_") or name == "model_config"
                    or name_of(ann_head) in ("ClassVar", "typing.ClassVar")
                    or is_call_to(stmt.value, {"PrivateAttr"})):
                continue
            entry = {"type": self.type_of(ann, scope), "defined_in": q}
            value = stmt.value
            if value is None:
                entry["required"] = True
            elif is_call_to(value, FIELD_FUNCS):
                self.field_call(value, scope, entry)
            else:
                self.default(value, scope, entry)
            fields[name] = entry
        return fields

    def field_call(self, call, scope, entry):
        default = call.args[0] if call.args else kwarg(call, "default")
        factory = kwarg(call, "default_factory")
        if factory is not None:
            entry["default"] = None
            entry["default_expr"] = "default_factory=" + self.src(factory)
        elif default is None or (isinstance(default, ast.Constant)
                                 and default.value is Ellipsis):
            entry["required"] = True
        else:
            self.default(default, scope, entry)
        status = kwarg(call, "status")
        if isinstance(status, ast.Constant) and isinstance(status.value, str):
            entry["status"] = status.value
        deprecated = kwarg(call, "deprecated")
        if deprecated is not None and not (isinstance(deprecated, ast.Constant)
                                           and deprecated.value in (None, False)):
            entry["deprecated"] = True
        aliases = []
        alias = kwarg(call, "alias")
        if isinstance(alias, ast.Constant) and isinstance(alias.value, str):
            aliases.append(alias.value)
        va = kwarg(call, "validation_alias")
        if isinstance(va, ast.Constant) and isinstance(va.value, str):
            aliases.append(va.value)
        elif is_call_to(va, {"AliasChoices"}):
            aliases += [a.value for a in va.args
                        if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if aliases:
            entry["aliases"] = sorted(set(aliases))
        entry["_alias"] = alias.value if isinstance(alias, ast.Constant) else None
        desc = kwarg(call, "description")
        if isinstance(desc, ast.Constant) and isinstance(desc.value, str):
            first = desc.value.strip().split("\n")[0].strip()
            entry["description"] = first[:200]
        constraints = {}
        for k in ("ge", "gt", "le", "lt", "min_length", "max_length"):
            v = kwarg(call, k)
            if v is not None:
                try:
                    constraints[k] = const_value(v)
                except ValueError:
                    constraints[k] = self.src(v)
        if constraints:
            entry["constraints"] = constraints
            entry["type"] = apply_bounds(entry["type"], call)

    def config_extra(self, q):
        """extra= of the class's own model_config, or None."""
        for stmt in self.classes[q].body:
            target = (stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                      else stmt.target if isinstance(stmt, ast.AnnAssign) else None)
            if isinstance(target, ast.Name) and target.id == "model_config" and stmt.value:
                v = stmt.value
                if is_call_to(v, {"ConfigDict"}):
                    e = kwarg(v, "extra")
                    if isinstance(e, ast.Constant):
                        return e.value
                if isinstance(v, ast.Dict):
                    for k, val in zip(v.keys, v.values):
                        if isinstance(k, ast.Constant) and k.value == "extra":
                            return val.value if isinstance(val, ast.Constant) else None
        return None

    def by_name(self, q, done):
        """Whether the model (or a base) sets populate_by_name/validate_by_name."""
        for stmt in self.classes[q].body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and name_of(stmt.targets[0]) == "model_config"
                    and is_call_to(stmt.value, {"ConfigDict"})):
                for k in ("populate_by_name", "validate_by_name"):
                    v = kwarg(stmt.value, k)
                    if isinstance(v, ast.Constant):
                        return bool(v.value)
        for b in self.model_bases(q):
            if b in done:
                return done[b]["_by_name"]
        return False

    def model_bases(self, q):
        scope = self.scope_of[q]
        out = []
        for b in self.classes[q].bases:
            n = name_of(b)
            inner = self.lookup(n, scope) if n else None
            if inner in self.models:
                out.append(inner)
        return out

    def build_models(self):
        done = {}

        def build(q):
            if q in done:
                return done[q]
            fields, extra = {}, None
            bases = self.model_bases(q)
            # Later bases first so that the first base wins, as in the MRO.
            for b in reversed(bases):
                base = build(b)
                fields.update(base["fields"])
            for b in bases:
                if extra is None:
                    extra = done[b]["extra"]
            for b in self.classes[q].bases:
                n = name_of(b)
                if n in PYDANTIC_BASES and extra is None:
                    extra = PYDANTIC_BASES[n]
            own = self.config_extra(q)
            if own is not None:
                extra = own
            fields.update(self.own_fields(q))
            model = {
                "bases": [name_of(b) or self.src(b) for b in self.classes[q].bases],
                "extra": extra or "ignore",
                "fields": fields,
            }
            done[q] = model
            model["_by_name"] = self.by_name(q, done)
            return model

        for q in self.models:
            build(q)
        out = {}
        for q, model in done.items():
            fields = {}
            for name, f in model["fields"].items():
                f = dict(f)
                alias = f.pop("_alias", None)
                if alias and alias != name and not model["_by_name"]:
                    f["alias_only"] = True
                fields[name] = f
            out[q] = {k: v for k, v in model.items() if not k.startswith("_")}
            out[q]["fields"] = fields
        return out

    def build_enums(self):
        out = {}
        for q in self.enums:
            values = []
            for v in self.enum_members(q).values():
                if v not in values:
                    values.append(v)
            out[q] = values
        return out

    def build_aliases(self):
        return {n: self.type_of(node, None, (n, )) for n, node in self.aliases.items()}


def apply_bounds(ty, call):
    """The numeric leaves of `ty` (through unions) with Field's ge/gt/le/lt."""
    bounds = {}
    for k in ("ge", "gt", "le", "lt"):
        v = kwarg(call, k)
        if v is not None:
            try:
                bounds[k] = const_value(v)
            except ValueError:
                pass
    if not bounds:
        return ty

    def go(t):
        if t["kind"] == "union":
            return dict(t, of=[go(m) for m in t["of"]])
        if t["kind"] not in ("int", "float"):
            return t
        t = dict(t)
        if "ge" in bounds:
            t["min"] = max(t.get("min", bounds["ge"]), bounds["ge"])
        if "gt" in bounds:
            g = bounds["gt"]
            if t["kind"] == "int" and float(g).is_integer():
                t["min"] = max(t.get("min", int(g) + 1), int(g) + 1)
            else:
                t["min"] = max(t.get("min", g), g)
                t["exclusive_min"] = True
        if "le" in bounds:
            t["max"] = bounds["le"]
        if "lt" in bounds:
            t["max"] = bounds["lt"]
            t["exclusive_max"] = True
        for k in ("min", "max"):
            if t["kind"] == "int" and isinstance(t.get(k), float) and t[k].is_integer():
                t[k] = int(t[k])
        return t

    return go(ty)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("llm_args", help="path to tensorrt_llm/llmapi/llm_args.py")
    ap.add_argument("--commit", required=True, help="the commit the file is from")
    ap.add_argument("--label", required=True,
                    help="the release label (version.py's __version__, or branch-shortsha)")
    ap.add_argument("--root", default=ROOT, help=f"the root model (default {ROOT})")
    args = ap.parse_args()

    with open(args.llm_args, "rb") as f:
        raw = f.read()
    cat = Catalog(raw.decode("utf-8"))
    models = cat.build_models()
    if args.root not in models:
        sys.exit(f"{args.llm_args}: no model {args.root!r}; models: {sorted(models)}")
    out = {
        "program": "tensorrt-llm-llm-api",
        "version": args.label,
        "source": {
            "repo": REPO,
            "path": PATH,
            "commit": args.commit,
            "sha256": hashlib.sha256(raw).hexdigest(),
        },
        "root": args.root,
        "models": models,
        "enums": cat.build_enums(),
        "type_aliases": cat.build_aliases(),
    }
    sys.stdout.write(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
