//! The C declarations LuaJIT's FFI reads for the per-request crossing (`resty.slidewin.answer`,
//! the lease store), written from the Rust items themselves, never copied by hand:
//!
//! - each `#[repr(C)]` struct shared with LuaJIT is defined through [`c_struct!`], which also
//!   writes its C typedef from the field list (each field's C from its Rust type, [`CType`]);
//! - each `extern "C"` function is defined through [`c_function!`], which also writes its C
//!   prototype from the Rust signature.
//!
//! `slidewin.cdefs()` hands Lua all of it as one text (`resty.slidewin.answer` passes it to
//! `ffi.cdef` once), and `slidewin.ffi_layout()` the Rust layout of each struct (`size_of`,
//! `offset_of!`), which tests/lua/unit/cdefs.lua compares with what LuaJIT made of the text.
//!
//! Both macros take the item in plain Rust syntax between parentheses, so rustfmt formats it
//! and clippy lints it as if it stood alone.

use std::ffi::c_int;

use mlua::{Lua, Result as LuaResult, Table};

/// A Rust type as a C declaration spells it: `c_type() name c_suffix()`.
pub trait CType {
    /// The C type before a declared name: `int`, `const char *`.
    fn c_type() -> String;
    /// What follows the name: `[320]` for an array, else nothing.
    fn c_suffix() -> String {
        String::new()
    }
}

impl CType for c_int {
    fn c_type() -> String {
        "int".into()
    }
}

impl CType for f64 {
    fn c_type() -> String {
        "double".into()
    }
}

impl CType for usize {
    fn c_type() -> String {
        "size_t".into()
    }
}

/// Bytes of text: `char`, as `ffi.string` and ngx_lua's header setter take them.
impl CType for u8 {
    fn c_type() -> String {
        "char".into()
    }
}

impl<T: CType, const N: usize> CType for [T; N] {
    fn c_type() -> String {
        T::c_type()
    }
    fn c_suffix() -> String {
        format!("[{N}]{}", T::c_suffix())
    }
}

/// A type a pointer of the FFI points to.
pub trait Pointee {
    /// The C type pointed to: `char`, `double`, `slidewin_answer_t`.
    fn c_pointee() -> String;
    /// `*const Self` in C.
    fn c_const_pointer() -> String {
        format!("const {} *", Self::c_pointee())
    }
    /// `*mut Self` in C.
    fn c_mut_pointer() -> String {
        format!("{} *", Self::c_pointee())
    }
}

impl Pointee for u8 {
    fn c_pointee() -> String {
        u8::c_type()
    }
}

impl Pointee for f64 {
    fn c_pointee() -> String {
        f64::c_type()
    }
}

impl<T: Pointee> CType for *const T {
    fn c_type() -> String {
        T::c_const_pointer()
    }
}

impl<T: Pointee> CType for *mut T {
    fn c_type() -> String {
        T::c_mut_pointer()
    }
}

/// Rust objects that C only passes along (what an object's `ffi_handle()` gives): `void *`,
/// whether the Rust pointer is `*const` or `*mut` (LuaJIT holds the handle as a `void *`).
macro_rules! opaque {
    ($($ty:ty),* $(,)?) => {
        $(
            impl $crate::cdefs::Pointee for $ty {
                fn c_pointee() -> String {
                    "void".into()
                }
                fn c_const_pointer() -> String {
                    "void *".into()
                }
            }
        )*
    };
}
pub(crate) use opaque;

/// `name` declared with type `T`: `int start[5]`, `const char *key`.
pub fn declaration<T: CType>(name: &str) -> String {
    let ty = T::c_type();
    let gap = if ty.ends_with('*') { "" } else { " " };
    format!("{ty}{gap}{name}{}", T::c_suffix())
}

/// One field of a [`CStruct`], as Rust lays it out.
pub struct Field {
    pub name: &'static str,
    /// Its C declaration, from its Rust type.
    pub declaration: String,
    pub offset: usize,
    pub size: usize,
}

/// A `#[repr(C)]` struct defined through [`c_struct!`].
pub trait CStruct: Sized {
    /// Its name in C.
    const C_NAME: &'static str;
    /// Its fields in order.
    fn fields() -> Vec<Field>;
    /// `typedef struct { ... } name;`.
    fn c_typedef() -> String {
        let mut text = String::from("typedef struct {\n");
        for field in Self::fields() {
            text += &format!("    {};\n", field.declaration);
        }
        text + &format!("}} {};\n", Self::C_NAME)
    }
}

/// Defines a `#[repr(C)]` struct and its C typedef ([`CStruct`]), named by `#[c_name = "..."]`;
/// a pointer to it is a pointer to that type in C ([`Pointee`]). Doc comments come first, then
/// `#[repr(C)]` (required: without it the layout is Rust's own) and `#[c_name]`.
macro_rules! c_struct {
    (
        $(#[doc = $doc:literal])*
        #[repr(C)]
        #[c_name = $c_name:literal]
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $field_doc:literal])*
                $field_vis:vis $field:ident: $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(C)]
        $vis struct $name {
            $(
                $(#[doc = $field_doc])*
                $field_vis $field: $ty,
            )*
        }

        impl $crate::cdefs::CStruct for $name {
            const C_NAME: &'static str = $c_name;
            fn fields() -> Vec<$crate::cdefs::Field> {
                vec![$(
                    $crate::cdefs::Field {
                        name: stringify!($field),
                        declaration: $crate::cdefs::declaration::<$ty>(stringify!($field)),
                        offset: std::mem::offset_of!($name, $field),
                        size: std::mem::size_of::<$ty>(),
                    },
                )*]
            }
        }

        impl $crate::cdefs::Pointee for $name {
            fn c_pointee() -> String {
                $c_name.into()
            }
        }
    };
}
pub(crate) use c_struct;

/// Declares a parameter of the given name with its Rust type's C ([`declaration`]).
pub type Declare = fn(&str) -> String;

/// One `extern "C"` function as C declares it, read from its Rust signature by [`c_function!`].
pub struct Prototype {
    pub name: &'static str,
    /// Each parameter's name and its declaration from the Rust type.
    pub params: &'static [(&'static str, Declare)],
    pub result: fn() -> String,
}

impl Prototype {
    /// `int name(type param, ...);`.
    pub fn c_text(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(name, declare)| declare(name))
            .collect();
        format!(
            "{} {}({});\n",
            (self.result)(),
            self.name,
            params.join(", ")
        )
    }
}

/// Defines an exported `pub unsafe extern "C" fn` and, as the const `#[c_prototype(NAME)]`
/// names, its C [`Prototype`] from the same signature. Doc comments come first, then
/// `#[no_mangle]` (required: the prototype declares the Rust name) and `#[c_prototype]`.
macro_rules! c_function {
    (
        $(#[doc = $doc:literal])*
        #[no_mangle]
        #[c_prototype($prototype:ident)]
        pub unsafe extern "C" fn $name:ident($($param:ident: $ty:ty),* $(,)?) -> $ret:ty
        $body:block
    ) => {
        $(#[doc = $doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($param: $ty),*) -> $ret
        $body

        #[doc = concat!("The C prototype of [`", stringify!($name), "`].")]
        pub(crate) const $prototype: $crate::cdefs::Prototype = $crate::cdefs::Prototype {
            name: stringify!($name),
            params: &[$((stringify!($param), $crate::cdefs::declaration::<$ty>)),*],
            result: <$ret as $crate::cdefs::CType>::c_type,
        };
    };
}
pub(crate) use c_function;

/// A struct shared with LuaJIT: its typedef and its Rust layout ([`layout`]).
struct Shared {
    typedef: fn() -> String,
    layout: fn(&Lua) -> LuaResult<Table>,
}

impl Shared {
    const fn of<S: CStruct>() -> Self {
        Shared {
            typedef: S::c_typedef,
            layout: layout::<S>,
        }
    }
}

/// The structs shared with LuaJIT, each declared before the functions that take it.
const STRUCTS: [Shared; 2] = [
    Shared::of::<crate::answer::Answer>(),
    Shared::of::<crate::lease::Call>(),
];

/// The functions LuaJIT calls. A `c_function!` left out of this list leaves its prototype
/// unused: a `dead_code` warning, which `cargo clippy -- -D warnings` refuses.
const FUNCTIONS: [Prototype; 5] = [
    crate::answer::DECIDE_PROTOTYPE,
    crate::answer::RENDER_PROTOTYPE,
    crate::answer::COUNTER_DECIDE_PROTOTYPE,
    crate::lease::SPEND_PROTOTYPE,
    crate::lease::INSTALL_PROTOTYPE,
];

/// The text `slidewin.cdefs()` returns: the structs, then the functions.
fn cdefs() -> String {
    let structs = STRUCTS.iter().map(|s| (s.typedef)());
    let functions = FUNCTIONS.iter().map(Prototype::c_text);
    structs.chain(functions).collect()
}

/// `{ name, size, fields = { { name, offset, size }, ... } }`: struct `S` as Rust lays it out.
fn layout<S: CStruct>(lua: &Lua) -> LuaResult<Table> {
    let t = lua.create_table()?;
    t.set("name", S::C_NAME)?;
    t.set("size", std::mem::size_of::<S>())?;
    let fields = lua.create_table()?;
    for field in S::fields() {
        let f = lua.create_table()?;
        f.set("name", field.name)?;
        f.set("offset", field.offset)?;
        f.set("size", field.size)?;
        fields.push(f)?;
    }
    t.set("fields", fields)?;
    Ok(t)
}

/// Adds `slidewin.cdefs()` (the C declarations of the FFI crossing) and `slidewin.ffi_layout()`
/// (the list of each shared struct's Rust layout, see [`layout`]) to the module.
pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    module.set("cdefs", lua.create_function(|_, ()| Ok(cdefs()))?)?;
    module.set(
        "ffi_layout",
        lua.create_function(|lua, ()| {
            let layouts = STRUCTS.iter().map(|s| (s.layout)(lua));
            lua.create_sequence_from(layouts.collect::<LuaResult<Vec<_>>>()?)
        })?,
    )?;
    Ok(())
}
