# frozen_string_literal: true

# A Sinatra app with a few routes and an ERB template: a framework's
# per-request cost on top of the server's. The suite requests /items/42.
require "sinatra/base"

class BenchApp < Sinatra::Base
  set :environment, :production
  set :logging, false
  set :views, File.join(__dir__, "views")

  get("/") { "Hello, World!\n" }
  get("/health") { "ok\n" }
  get "/items/:id" do
    @id = Integer(params[:id])
    @items = Array.new(10) { |i| { name: "item #{@id}-#{i}", price: (i * 3.5).round(2) } }
    erb :items
  end
  post("/items") { status 201 }
end

run BenchApp
