//! `#[derive(Module)]` for wgtorch: writes `wgtorch::nn::Module` (the parameter, buffer and
//! child visitors, and train/eval propagation) from a struct's fields. Use it through
//! `wgtorch::nn::Module`, which names both the trait and this derive.

#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{
    parse_macro_input, Data, DeriveInput, Fields, GenericArgument, Ident, PathArguments, Type,
};

/// Derive `wgtorch::nn::Module` for a struct with named fields.
///
/// Field rules:
/// - `#[param]` / `#[buffer]`: a `Tensor`, `Option<Tensor>` (present when `Some`) or
///   `Vec<Tensor>` (named `name.0`, `name.1`, ...) listed as a parameter or a buffer.
/// - every other field is a child module (its type must implement `Module`: `Linear`,
///   `Vec<Block>`, `Option<Dropout>`, `Box<dyn Forward>`, ...), named after the field;
/// - except configuration, skipped automatically: integers, floats, `bool`, `char`, `String`,
///   `&'static str`, `Device`, `DType`, `PhantomData`, and arrays, tuples, `Option`s and `Vec`s
///   of them; `#[module(skip)]` skips any other field;
/// - an unmarked `Tensor` field (also inside `Option`/`Vec`) is a compile error: mark it
///   `#[param]`, `#[buffer]` or `#[module(skip)]`.
/// - `#[module(name = "...")]` sets the state_dict name of a parameter, buffer or child.
/// - `#[module(training)]` on one `bool` field: it receives `set_training` (train/eval).
///   Children always receive it.
///
/// On the struct, `#[module(forward)]` also implements `Forward` with the struct's inherent
/// `fn forward(&self, &Tensor) -> Result<Tensor>` (so it can go into a `Sequential`); a struct
/// without one fails to compile ("function cannot return without recursing", at the attribute).
///
/// State_dict order is PyTorch's: the struct's parameters, then its buffers, then each child's
/// entries, in field order.
#[proc_macro_derive(Module, attributes(param, buffer, module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

enum Role {
    /// A `#[param]` (true) or `#[buffer]` (false) field.
    Slots(bool),
    Child,
    Training,
    Skip,
}

struct FieldInfo {
    access: TokenStream2,
    name: String,
    ty: Type,
    role: Role,
    span: Span,
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let krate = quote!(::wgtorch);
    let mut want_forward = None;
    for attr in &input.attrs {
        if attr.path().is_ident("module") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("forward") {
                    want_forward = Some(meta.path.span());
                    Ok(())
                } else {
                    Err(meta.error("unknown struct attribute; expected #[module(forward)]"))
                }
            })?;
        }
    }
    let data = match &input.data {
        Data::Struct(s) => s,
        _ => {
            return Err(syn::Error::new(
                input.ident.span(),
                "#[derive(Module)] supports structs only",
            ))
        }
    };
    let fields: Vec<&syn::Field> = match &data.fields {
        Fields::Named(f) => f.named.iter().collect(),
        Fields::Unit => Vec::new(),
        Fields::Unnamed(_) => {
            return Err(syn::Error::new(
                input.ident.span(),
                "#[derive(Module)] needs named fields (they name the parameters and children)",
            ))
        }
    };
    // Every field's error at once, not only the first.
    let mut infos = Vec::new();
    let mut errors: Option<syn::Error> = None;
    for f in fields {
        match field_info(f) {
            Ok(i) => infos.push(i),
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }
    if infos
        .iter()
        .filter(|i| matches!(i.role, Role::Training))
        .count()
        > 1
    {
        return Err(syn::Error::new(
            input.ident.span(),
            "at most one field may be #[module(training)]",
        ));
    }

    let generic_idents: Vec<Ident> = input
        .generics
        .type_params()
        .map(|p| p.ident.clone())
        .collect();
    let mut generics = input.generics.clone();
    {
        let wc = generics.make_where_clause();
        for i in &infos {
            if matches!(i.role, Role::Child) && mentions_any(&i.ty, &generic_idents) {
                let ty = &i.ty;
                wc.predicates
                    .push(syn::parse_quote!(#ty: #krate::nn::Module));
            }
        }
    }
    let (impl_g, ty_g, where_c) = generics.split_for_impl();
    let name = &input.ident;

    let (mut visit, mut visit_mut) = (Vec::new(), Vec::new());
    for want_param in [true, false] {
        let k = if want_param {
            quote!(Param)
        } else {
            quote!(Buffer)
        };
        for i in &infos {
            if let Role::Slots(is_param) = i.role {
                if is_param != want_param {
                    continue;
                }
                let (a, n, sp) = (&i.access, &i.name, i.span);
                visit.push(quote_spanned!(sp=> #krate::nn::TensorSlots::visit_slots(&self.#a, #n, #krate::nn::Kind::#k, __f);));
                visit_mut.push(quote_spanned!(sp=> #krate::nn::TensorSlots::visit_slots_mut(&mut self.#a, #n, #krate::nn::Kind::#k, __f);));
            }
        }
    }
    let (mut kids, mut kids_mut, mut train) = (Vec::new(), Vec::new(), Vec::new());
    let mut flag = quote!(::core::option::Option::None);
    for i in &infos {
        let (a, n, sp) = (&i.access, &i.name, i.span);
        match i.role {
            Role::Child => {
                visit.push(quote_spanned!(sp=> #krate::nn::visit_child(&self.#a, #n, __f);));
                visit_mut
                    .push(quote_spanned!(sp=> #krate::nn::visit_child_mut(&mut self.#a, #n, __f);));
                kids.push(
                    quote_spanned!(sp=> #krate::nn::Module::visit_as_child(&self.#a, #n, __f);),
                );
                kids_mut.push(quote_spanned!(sp=> #krate::nn::Module::visit_as_child_mut(&mut self.#a, #n, __f);));
                train.push(
                    quote_spanned!(sp=> #krate::nn::Module::set_training(&mut self.#a, __on);),
                );
            }
            Role::Training => {
                train.insert(0, quote_spanned!(sp=> self.#a = __on;));
                flag = quote_spanned!(sp=> ::core::option::Option::Some(self.#a));
            }
            _ => {}
        }
    }
    let forward = match want_forward {
        // Spanned at the user's attribute, so that the recursion lint (which stays quiet
        // inside macro expansions) reports a struct without an inherent `forward`.
        Some(sp) => quote_spanned! {sp=>
            impl #impl_g #krate::nn::Forward for #name #ty_g #where_c {
                #[deny(unconditional_recursion)]
                fn forward(&self, x: &#krate::Tensor) -> #krate::Result<#krate::Tensor> {
                    // The struct's inherent `forward` (an inherent function shadows the trait's).
                    Self::forward(self, x)
                }
            }
        },
        None => quote!(),
    };
    Ok(quote! {
        impl #impl_g #krate::nn::Module for #name #ty_g #where_c {
            #[allow(unused_variables)]
            fn visit(&self, __f: &mut dyn FnMut(&str, &#krate::Tensor, #krate::nn::Kind)) {
                #(#visit)*
            }
            #[allow(unused_variables)]
            fn visit_mut(&mut self, __f: &mut dyn FnMut(&str, &mut #krate::Tensor, #krate::nn::Kind)) {
                #(#visit_mut)*
            }
            #[allow(unused_variables)]
            fn visit_children<'__a>(&'__a self, __f: &mut dyn FnMut(&str, &'__a dyn #krate::nn::Module)) {
                #(#kids)*
            }
            #[allow(unused_variables)]
            fn visit_children_mut<'__a>(&'__a mut self, __f: &mut dyn FnMut(&str, &'__a mut dyn #krate::nn::Module)) {
                #(#kids_mut)*
            }
            #[allow(unused_variables)]
            fn set_training(&mut self, __on: bool) {
                #(#train)*
            }
            fn training_flag(&self) -> ::core::option::Option<bool> {
                #flag
            }
        }
        #forward
    })
}

fn field_info(f: &syn::Field) -> syn::Result<FieldInfo> {
    let ident = f
        .ident
        .as_ref()
        .ok_or_else(|| syn::Error::new(f.span(), "expected a named field"))?;
    let mut name = ident.to_string();
    // A raw identifier (`r#type`) is named without its prefix, as PyTorch's attribute would be.
    if let Some(stripped) = name.strip_prefix("r#") {
        name = stripped.to_string();
    }
    let (mut param, mut buffer, mut skip, mut training) = (false, false, false, false);
    for attr in &f.attrs {
        if attr.path().is_ident("param") {
            attr.meta.require_path_only()?;
            param = true;
        } else if attr.path().is_ident("buffer") {
            attr.meta.require_path_only()?;
            buffer = true;
        } else if attr.path().is_ident("module") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("skip") {
                    skip = true;
                } else if meta.path.is_ident("training") {
                    training = true;
                } else if meta.path.is_ident("name") {
                    let s: syn::LitStr = meta.value()?.parse()?;
                    if s.value().is_empty() || s.value().contains('.') {
                        return Err(syn::Error::new(
                            s.span(),
                            "a module name must be non-empty and contain no '.'",
                        ));
                    }
                    name = s.value();
                } else {
                    return Err(meta.error(
                        "unknown field attribute; expected #[module(skip)], #[module(training)] or #[module(name = \"...\")]",
                    ));
                }
                Ok(())
            })?;
        }
    }
    let marks = [param, buffer, skip, training]
        .iter()
        .filter(|&&b| b)
        .count();
    if marks > 1 {
        return Err(syn::Error::new(
            f.span(),
            "a field takes one of #[param], #[buffer], #[module(skip)] and #[module(training)]",
        ));
    }
    let role = if param {
        Role::Slots(true)
    } else if buffer {
        Role::Slots(false)
    } else if training {
        Role::Training
    } else if skip {
        Role::Skip
    } else if mentions_tensor(&f.ty) {
        return Err(syn::Error::new(
            f.ty.span(),
            format!(
                "field `{ident}` holds a Tensor: mark it #[param], #[buffer] or #[module(skip)]"
            ),
        ));
    } else if is_config(&f.ty) {
        Role::Skip
    } else {
        Role::Child
    };
    Ok(FieldInfo {
        access: quote!(#ident),
        name,
        ty: f.ty.clone(),
        role,
        span: f.span(),
    })
}

/// The last path segment's name and its type arguments.
fn last_segment(ty: &Type) -> Option<(String, Vec<&Type>)> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    let args = match &seg.arguments {
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((seg.ident.to_string(), args))
}

/// Whether the type is (or holds) a `Tensor`.
fn mentions_tensor(ty: &Type) -> bool {
    match ty {
        Type::Path(_) => match last_segment(ty) {
            Some((n, args)) => n == "Tensor" || args.into_iter().any(mentions_tensor),
            None => false,
        },
        Type::Array(a) => mentions_tensor(&a.elem),
        Type::Slice(a) => mentions_tensor(&a.elem),
        Type::Tuple(t) => t.elems.iter().any(mentions_tensor),
        Type::Reference(r) => mentions_tensor(&r.elem),
        Type::Paren(p) => mentions_tensor(&p.elem),
        Type::Group(g) => mentions_tensor(&g.elem),
        _ => false,
    }
}

/// Plain configuration (numbers, flags, strings, devices, dtypes and containers of them).
fn is_config(ty: &Type) -> bool {
    const LEAVES: &[&str] = &[
        "u8",
        "u16",
        "u32",
        "u64",
        "u128",
        "usize",
        "i8",
        "i16",
        "i32",
        "i64",
        "i128",
        "isize",
        "f32",
        "f64",
        "bool",
        "char",
        "String",
        "str",
        "Device",
        "DType",
        "PhantomData",
    ];
    match ty {
        Type::Path(_) => match last_segment(ty) {
            Some((n, _)) if n == "PhantomData" => true,
            Some((n, args)) if LEAVES.contains(&n.as_str()) => args.is_empty(),
            Some((n, args)) if n == "Option" || n == "Vec" || n == "Box" => {
                !args.is_empty() && args.into_iter().all(is_config)
            }
            _ => false,
        },
        Type::Array(a) => is_config(&a.elem),
        Type::Slice(a) => is_config(&a.elem),
        Type::Tuple(t) => t.elems.iter().all(is_config),
        Type::Reference(r) => r.mutability.is_none() && is_config(&r.elem),
        Type::Paren(p) => is_config(&p.elem),
        Type::Group(g) => is_config(&g.elem),
        _ => false,
    }
}

/// Whether `ty` names any of the struct's type parameters.
fn mentions_any(ty: &Type, params: &[Ident]) -> bool {
    if params.is_empty() {
        return false;
    }
    let s = quote!(#ty).to_string();
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| params.iter().any(|p| p == w))
}
