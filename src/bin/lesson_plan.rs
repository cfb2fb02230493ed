//! Prints the lessons' walk plan (`attention_lab::views::lesson::walk`) as JSON: for every step, its
//! view's link and the exact value of every live figure it names. The browser walk reads it.

fn main() {
    let plan = attention_lab::views::lesson::walk::plan();
    match serde_json::to_string_pretty(&plan) {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("lesson_plan: {e}");
            std::process::exit(1);
        }
    }
}
