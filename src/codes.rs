//! Codes: the named outcomes and rejections a user reads (`not_allowed`, `stuck`,
//! `self_approval`, …). Each family is an enum declared once with [`codes!`], which gives
//! every variant its snake_case name for serde, `as_str`, `from_code`, `Display` and the list
//! of all codes from that single table: no code is spelled twice.

/// Declares a code enum from one table of `Variant = "text"` lines (doc comments and
/// attributes allowed on the enum and on each variant). The enum keeps the derives it is
/// given; it must derive `Serialize` and `Deserialize`, whose names come from the table.
macro_rules! codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        #[allow(dead_code, unreachable_pub)]
        impl $name {
            /// Every code of this family, in the order declared.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The code as a user reads it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// The code named `text`, if it is one of this family (the inverse of
            /// `as_str`).
            pub fn from_code(text: &str) -> Option<Self> {
                match text {
                    $( $text => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, text: &&str) -> bool {
                self.as_str() == *text
            }
        }

        impl From<$name> for ::std::borrow::Cow<'static, str> {
            fn from(code: $name) -> Self {
                ::std::borrow::Cow::Borrowed(code.as_str())
            }
        }
    };
}

pub(crate) use codes;
