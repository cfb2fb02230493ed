//! The engine as the components share it: started once by the app, read by every view.

use std::rc::Rc;

use leptos::prelude::*;

use crate::engine::Engine;

/// The engine once started; `None` while the GPU is being opened.
pub type EngineSignal = RwSignal<Option<Rc<Engine>>, LocalStorage>;
